package io.rdma4j.spring.boot;

import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.BeanCreationException;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.util.ReflectionUtils;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Map;

/**
 * Publishes the results of {@link RdmaRegion} methods once every singleton exists (before the
 * endpoint starts accepting peers).
 */
public class RdmaRegionPublisher implements SmartInitializingSingleton {

    private static final System.Logger LOG = System.getLogger(RdmaRegionPublisher.class.getName());

    private final ConfigurableListableBeanFactory beanFactory;
    private final ObjectProvider<RdmaTemplate> template;

    public RdmaRegionPublisher(ConfigurableListableBeanFactory beanFactory, ObjectProvider<RdmaTemplate> template) {
        this.beanFactory = beanFactory;
        this.template = template;
    }

    @Override
    public void afterSingletonsInstantiated() {
        for (String beanName : beanFactory.getBeanDefinitionNames()) {
            if (!beanFactory.getBeanDefinition(beanName).isSingleton() || beanFactory.getBeanDefinition(beanName).isAbstract()) {
                continue;
            }
            Class<?> type = beanFactory.getType(beanName);
            if (type == null || type.getName().startsWith("org.springframework.")) {
                continue;
            }
            Map<Method, RdmaRegion> methods = MethodIntrospector.selectMethods(type,
                    (MethodIntrospector.MetadataLookup<RdmaRegion>) m -> AnnotatedElementUtils.findMergedAnnotation(m, RdmaRegion.class));
            if (methods.isEmpty()) {
                continue;
            }
            if (template.getObject().transport() instanceof UnavailableRdmaTransport unavailable) {
                // fail-fast=false: the application runs without RDMA, so there is nothing to publish with; health says why.
                LOG.log(System.Logger.Level.WARNING, "rdma4j regions of bean '" + beanName + "' not published: "
                        + unavailable.failure().getMessage());
                continue;
            }
            Object bean = beanFactory.getBean(beanName);
            methods.forEach((method, annotation) -> publish(beanName, bean, method, annotation.value()));
        }
    }

    private void publish(String beanName, Object bean, Method method, String name) {
        boolean takesArena = method.getParameterCount() == 1 && method.getParameterTypes()[0] == Arena.class;
        if (method.getParameterCount() != 0 && !takesArena) {
            throw new BeanCreationException(beanName, "@RdmaRegion method " + method
                    + " must take no arguments or one java.lang.foreign.Arena to allocate the region in");
        }
        if (takesArena && method.getReturnType() == Path.class) {
            throw new BeanCreationException(beanName, "@RdmaRegion method " + method
                    + " returns a Path, which the template maps itself; remove the Arena parameter");
        }
        Method invocable = AopUtils.selectInvocableMethod(method, bean.getClass());
        ReflectionUtils.makeAccessible(invocable);
        // The region owns this arena: it is closed after the region is deregistered, or now if publishing fails.
        Arena arena = takesArena ? Arena.ofShared() : null;
        try {
            Object value = takesArena ? ReflectionUtils.invokeMethod(invocable, bean, arena) : ReflectionUtils.invokeMethod(invocable, bean);
            RdmaTemplate publisher = template.getObject();
            switch (value) {
                case MemorySegment segment -> publisher.publish(name, segment, arena);
                case ByteBuffer buffer -> publisher.publish(name, buffer, arena);
                case Path file -> publisher.publish(name, file);
                case null -> throw new IllegalArgumentException("the method returned null");
                default -> throw new IllegalArgumentException("the method returned a " + value.getClass().getName()
                        + "; return a MemorySegment, a direct ByteBuffer or a Path");
            }
        } catch (RuntimeException e) {
            if (arena != null) {
                arena.close();
            }
            throw new BeanCreationException(beanName, "cannot publish @RdmaRegion(\"" + name + "\") of " + method, e);
        }
    }
}
